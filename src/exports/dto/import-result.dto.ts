import { ApiProperty } from '@nestjs/swagger';

/** The answer of POST /v1/end-users/import. */
export class ImportResultDto {
  @ApiProperty({ example: 'customer-42', description: 'The end user created' })
  user_id: string;

  @ApiProperty({
    example: 1,
    description:
      "Personalities of the document created in the organization (the others were the organization's already, by id)",
  })
  personalities_created: number;

  @ApiProperty({ example: 1042, description: 'Memories written, in the order of the document' })
  memories_imported: number;

  @ApiProperty({ example: 12, description: 'Facts written' })
  facts_imported: number;
}
